"""drift: DRIFT search over communities with ranked follow-ups and validated citations (spec 004)."""
