# examples: workloads on memtrace's host device that really run; built by `make`.
noinst_PROGRAMS += examples/train_mlp examples/fragmentation examples/oom
noinst_HEADERS += examples/args.h
examples_train_mlp_LDADD = libmemtrace.la -lm
examples_fragmentation_LDADD = libmemtrace.la
examples_oom_LDADD = libmemtrace.la
