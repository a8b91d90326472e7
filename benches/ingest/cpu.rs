//! Where the machine's CPU went during a row: the server, the load generator, and everything
//! else; and what everything else wrote to disk. The machine is shared; a row with a large
//! "other" share was measured on a busy machine, and the table says so instead of hiding it.
//! Other processes' disk writes matter as much: they slow every fsync of a durable row while
//! using little CPU.

/// CPU times in clock ticks (`USER_HZ`), read from `/proc`.
#[derive(Clone, Copy)]
pub struct Snapshot {
    busy: u64,
    server: u64,
    load: u64,
    /// Bytes written to the machine's disks, and by the server.
    disk_written: u64,
    server_written: u64,
}

/// Shares of one CPU, in percent (a 2-CPU machine has 200).
#[derive(Clone, Copy, Default)]
pub struct Shares {
    pub server: f64,
    pub load: f64,
    pub other: f64,
    /// What the server wrote to disk (`write_bytes`), in MiB/s.
    pub server_writes: f64,
    /// What the disks were sent beyond that, in MiB/s: other processes' writes, and the
    /// server's own that `write_bytes` leaves out (file system metadata; about 7% of its writes
    /// in a durable row here).
    pub other_writes: f64,
}

impl Shares {
    /// Whether others' work may have slowed the row: more than 20% of a CPU, or disk writes
    /// beyond 1 MiB/s plus 15% of the server's own.
    pub fn busy(&self) -> bool {
        self.other > 20.0 || self.other_writes > 1.0 + 0.15 * self.server_writes
    }
}

pub fn snapshot(server_pid: u32) -> Snapshot {
    Snapshot {
        busy: machine_busy().unwrap_or(0),
        server: process_ticks(&format!("/proc/{server_pid}/stat"), false).unwrap_or(0),
        // The benchmark itself (the in-repo client) and its waited-for children (wrk).
        load: process_ticks("/proc/self/stat", true).unwrap_or(0),
        disk_written: disk_written().unwrap_or(0),
        server_written: process_written(server_pid).unwrap_or(0),
    }
}

/// What each used between `a` and `b`, `seconds` apart.
#[allow(clippy::cast_precision_loss)]
pub fn between(a: Snapshot, b: Snapshot, seconds: f64) -> Shares {
    let pct = |ticks: u64| ticks as f64 / ticks_per_second() / seconds.max(1e-3) * 100.0;
    let busy = b.busy.saturating_sub(a.busy);
    let server = b.server.saturating_sub(a.server);
    let load = b.load.saturating_sub(a.load);
    let written = b.disk_written.saturating_sub(a.disk_written);
    let by_server = b.server_written.saturating_sub(a.server_written);
    let mib_s = |bytes: u64| bytes as f64 / (1024.0 * 1024.0) / seconds.max(1e-3);
    Shares {
        server: pct(server),
        load: pct(load),
        other: pct(busy.saturating_sub(server + load)),
        server_writes: mib_s(by_server),
        other_writes: mib_s(written.saturating_sub(by_server)),
    }
}

/// Bytes written to the machine's disks (`/proc/diskstats`, sectors of 512 bytes), loop and
/// zram devices left out.
fn disk_written() -> Option<u64> {
    let stats = std::fs::read_to_string("/proc/diskstats").ok()?;
    let mut sectors = 0;
    for line in stats.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(name) = fields.get(2) else { continue };
        let whole_disk = std::path::Path::new("/sys/block").join(name).exists();
        if !whole_disk || name.starts_with("loop") || name.starts_with("zram") {
            continue;
        }
        sectors += fields
            .get(9)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(sectors * 512)
}

/// `write_bytes` of `/proc/PID/io`: what the process caused to be written to disk.
fn process_written(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

fn ticks_per_second() -> f64 {
    // USER_HZ is 100 on every Linux architecture this runs on.
    100.0
}

/// Busy ticks of all CPUs: everything in the `cpu` line of `/proc/stat` but idle and iowait.
fn machine_busy() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user)
    let get = |i: usize| fields.get(i).copied().unwrap_or(0);
    Some(get(0) + get(1) + get(2) + get(5) + get(6) + get(7))
}

/// utime + stime of a process, and with `children`, of its waited-for children too.
fn process_ticks(path: &str, children: bool) -> Option<u64> {
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the command name, which may hold spaces, start at field 3 (state).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<u64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // utime, stime, cutime, cstime are fields 14..=17, so 11..=14 here.
    let own = fields.get(11)? + fields.get(12)?;
    Some(if children {
        own + fields.get(13)? + fields.get(14)?
    } else {
        own
    })
}
