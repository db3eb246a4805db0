"""KG-driven context enhancement: triplets from C, entity set, one-hop KG facts, C_enc = C ⊕ S."""
