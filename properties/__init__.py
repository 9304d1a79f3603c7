"""How inputs are generated and results judged: cases, strategies, oracles, backends, the pytest
plugin, the campaign and the test battery (properties/battery) the plugin runs on any kernel."""
