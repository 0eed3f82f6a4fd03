"""Planning on top of simulations: parameter sweeps, Pareto fronts."""
