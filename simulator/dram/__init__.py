"""The GDDR6 memory system: organization, timing rules (in CK cycles), controller and engine."""
