# interpose: see the top-level Makefile.am
