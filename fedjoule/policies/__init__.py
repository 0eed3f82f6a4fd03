"""Selection and allocation policies as pure functions (issue 29), which the round's select
and allocate steps call (simulator/policy_step.py): what a server observes and decides
(observation), who takes part (select), each one's share of the uplink band (bandwidth,
min_energy), its CPU frequency and local steps (deadline), and the interface of a plug-in
policy (plugin). numpy and scipy only, no torch, no SimPy; import the submodules
(bandwidth and min_energy load scipy.optimize)."""
