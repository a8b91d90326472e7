//! The `tracker` binary: everything lives in the library; this only hands over to the CLI.

/// mimalloc instead of glibc's malloc: glibc keeps one arena per allocating thread, and redb's
/// page cache, whose pages are allocated by whichever thread reads them (the writer, the reader
/// threads), leaves each arena at its own high-water mark; mimalloc returns freed pages to the
/// OS, and is faster on the write path (`docs/benchmarks-history.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // No transparent huge pages for this process, before any thread allocates: with them,
    // mimalloc's arenas are 2 MiB pages made resident whole. The
    // `no_thp` feature only stops mimalloc asking for them; a host whose THP setting is
    // `always` gives them anyway, unless the process opts out. A kernel without the flag
    // (before 3.15) refuses it, and the tracker runs as before.
    let _ = rustix::thread::disable_transparent_huge_pages(true);
    tracker::cli::main()
}
