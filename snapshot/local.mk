# snapshot: the .memtrace format (docs/FORMAT.md): writer, streaming reader, tests.
libmemtrace_core_la_SOURCES += snapshot/writer.c snapshot/writer.h snapshot/reader.c \
	snapshot/format.h
include_HEADERS += snapshot/memtrace_snapshot.h
