"""The evidence-ledger tool world (SafeActBench)."""
