"""Answer generation: its settings (``settings``), loading the generating model (``loading``) and batched
greedy decoding (``decoder``). Import the modules directly: ``settings`` stays cheap to import."""
