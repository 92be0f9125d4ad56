"""The form benchmark of AdvSim2Real: 150 form-filling tasks in five skill strata."""
