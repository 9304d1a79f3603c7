"""How a launch is judged: the oracles, the metamorphic relations and cross-variant agreement."""
