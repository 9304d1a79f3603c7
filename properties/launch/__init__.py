"""How a kernel under test is found and launched: the backend it runs on (backends), what a run tests
(targets: the built-in variants, mutants and a user's kernel, user_kernel and kernel_spec), what its
launcher refuses and why (preconditions), compiling ahead (ahead), and one launch with whatever it
raises classified (launching)."""
