def knead(dough: float, folds: int = 12) -> float:
    """Stretch and fold the dough; each fold builds gluten."""
    return dough * (1 + 0.01 * folds)
