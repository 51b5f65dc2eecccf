"""Test support: doubles for what cannot be provoked from a trained actor or a real robot."""
