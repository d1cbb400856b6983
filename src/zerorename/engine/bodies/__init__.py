"""What goes into a part: any upload source cut into parts (``sources.py``), ranges of a
file read where they lie (``filebody.py``), and the file-like writers a caller writes into
(``writers.py``). Memory in flight is bounded here: one part per part in flight."""
