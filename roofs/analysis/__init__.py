"""From rows to roofs: the roofline model, derivation, levels, bounds, the hierarchy, launch floors, sustained
figures, energy, datasheets and checks."""
