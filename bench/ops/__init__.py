"""One module per op family; importing a module registers its ops and impls."""
