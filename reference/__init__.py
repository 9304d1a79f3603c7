"""What "right" means: number formats, the float64 product, the torch peer, and the error bound."""
