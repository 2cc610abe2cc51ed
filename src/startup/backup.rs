//! One online backup of a live store: exported to a `.partial` file, fsynced, and renamed
//! to its final name only once every write it may hold is durable, so a file under the final
//! name never holds a write the log or the group could still lose. A partial file that is not
//! finished is removed when dropped. Must not touch: when a backup is asked for (SIGUSR1, in
//! `signals`) or the export's format (`transfer`).

use crate::store::Store;

/// Completes once everything an export of `store` may have read is durable.
pub(super) async fn committed(store: &Store) -> Result<(), String> {
    let barrier = store
        .barrier_after_visible_writes()
        .map_err(|error| error.to_string())?;
    barrier
        .durable()
        .await
        .map_err(|error| format!("the writes it holds could not be confirmed durable: {error}"))
}

/// An online backup written and fsynced under its `.partial` name, not yet counted: removed
/// when dropped (a failed wait, or the backup task ended at shutdown) unless finished.
pub(super) struct PartialBackup {
    partial: std::path::PathBuf,
    path: std::path::PathBuf,
    dir: std::path::PathBuf,
    exported: crate::transfer::export::Exported,
}

impl PartialBackup {
    /// Renames it to its final name: the backup counts.
    pub(super) fn finish(
        self,
    ) -> Result<(std::path::PathBuf, crate::transfer::export::Exported), String> {
        std::fs::rename(&self.partial, &self.path).map_err(|error| error.to_string())?;
        if let Ok(handle) = std::fs::File::open(&self.dir) {
            let _ = handle.sync_all();
        }
        Ok((self.path.clone(), self.exported))
    }
}

impl Drop for PartialBackup {
    fn drop(&mut self) {
        // Gone already once renamed.
        let _ = std::fs::remove_file(&self.partial);
    }
}

pub(super) fn export_backup(store: &Store, dir: &std::path::Path) -> Result<PartialBackup, String> {
    std::fs::create_dir_all(dir).map_err(|error| format!("creating {}: {error}", dir.display()))?;
    let stamp = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%S%.3fZ")
        .to_string();
    let path = dir.join(format!("boxsub-backup-{stamp}.jsonl"));
    let partial = path.with_extension("jsonl.partial");
    let file = std::fs::File::create(&partial)
        .map_err(|error| format!("creating {}: {error}", partial.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let mut progress = crate::transfer::Progress::logged();
    let exported = crate::transfer::export::export(store, None, &mut out, &mut progress)
        .map_err(|error| error.to_string());
    let written = exported.and_then(|exported| {
        let file = out.into_inner().map_err(|error| error.to_string())?;
        file.sync_all().map_err(|error| error.to_string())?;
        Ok(exported)
    });
    match written {
        Ok(exported) => Ok(PartialBackup {
            partial,
            path,
            dir: dir.to_owned(),
            exported,
        }),
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            Err(format!("{}: {error}", path.display()))
        }
    }
}
