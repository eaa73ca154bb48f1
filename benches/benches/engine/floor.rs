//! The floors runner is compared with: a minimal tokio scheduler and the disk alone.

use std::path::Path;
use std::time::{Duration, Instant};

/// The floor: runs `parents` with a hand-written scheduler on tokio, each task a spawned no-op
/// that reports its index through a channel; a task is spawned once its last parent reported.
/// The scheduler runs on a worker thread of its own, so its spawns go to that worker's queue.
pub(crate) async fn floor(parents: Vec<Vec<usize>>) {
    let mut children = vec![Vec::new(); parents.len()];
    let mut waiting: Vec<usize> = parents.iter().map(Vec::len).collect();
    for (i, ps) in parents.iter().enumerate() {
        for &p in ps {
            children[p].push(i);
        }
    }
    let (sender, mut done) = tokio::sync::mpsc::unbounded_channel::<usize>();
    let spawn = |i: usize| {
        let sender = sender.clone();
        tokio::spawn(async move {
            let _ = sender.send(i);
        });
    };
    (0..parents.len()).filter(|&i| waiting[i] == 0).for_each(spawn);
    for _ in 0..parents.len() {
        let i = done.recv().await.expect("the scheduler holds a sender until every task reported");
        for &child in &children[i] {
            waiting[child] -= 1;
            if waiting[child] == 0 {
                spawn(child);
            }
        }
    }
}

/// The disk's own floor under a JSONL run: the time to write `bytes` to a new file in `syncs`
/// equal appends, each followed by `fdatasync`, with no runner at all.
pub(crate) fn disk_floor(folder: &Path, bytes: u64, syncs: u64) -> Duration {
    use std::io::Write as _;
    let path = folder.join("disk-floor.jsonl");
    let mut file = std::fs::File::create(&path).expect("a new file beside the logs");
    let append = vec![b'x'; (bytes / syncs.max(1)) as usize];
    let started = Instant::now();
    for _ in 0..syncs {
        file.write_all(&append).expect("the disk takes the append");
        file.sync_data().expect("the disk syncs");
    }
    let spent = started.elapsed();
    let _ = std::fs::remove_file(path);
    spent
}
