//! The `tracker` binary: everything lives in the library; this only hands over to the CLI.

/// mimalloc instead of glibc's malloc. Measured (BENCHMARKS.md, "Memory: an allocator that gives
/// pages back"): glibc keeps one arena per allocating thread, and redb's page cache, whose pages
/// are allocated by whichever thread reads them (the writer, the reader threads), left each arena
/// at its own high-water mark: the full table peaked at 80 MiB for a live heap of 38. mimalloc
/// returns freed pages to the OS, and the same table peaks at 60 MiB and runs 5–13% faster.
/// `no_thp` (Cargo.toml): with transparent huge pages, mimalloc's arenas were 2 MiB pages made
/// resident whole, 35 MiB at an idle start.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tracker::cli::main()
}
