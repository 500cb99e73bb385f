package engine

// The seed's prefill backup policy (F33). With release-after-transfer (the
// default, and SGLang's) a seed's prompt KV on the prefill worker goes back
// to its radix cache once the transfer landed, evictable like any other.
// With capacity-backup the prefill worker keeps the seed's prompt pinned for
// its session — a static snapshot as of the seed, not kept up to date with
// the appends the decoder takes afterwards — for at most
// min(4, max(1, pool / (2 · prompt))) sessions, least recently seeded
// dropped first (the seed's replay.py cap).

type backup struct {
	session SessionKey
	node    int32
}

// keepBackup moves a released seed's lock from the request to its session.
func (w *Worker) keepBackup(now float64, r *Request) {
	if !w.cfg.PrefillBackup || !r.KeepSession || r.Session == "" || !r.locked || w.tree == nil {
		return
	}
	limit := min(4, max(1, int(w.capacity/max(1, 2*int64(r.Input)))))
	kept := w.backups[:0]
	for _, b := range w.backups {
		if b.session == r.sessKey() {
			w.tree.Unlock(b.node, now) // the newer seed replaces it
			continue
		}
		kept = append(kept, b)
	}
	w.backups = kept
	for len(w.backups) >= limit {
		w.tree.Unlock(w.backups[0].node, now)
		w.backups = append(w.backups[:0], w.backups[1:]...)
	}
	w.backups = append(w.backups, backup{session: r.sessKey(), node: r.node})
	r.locked = false // the backup holds the lock now
}

// Backups lists the sessions whose seed-time KV this prefill worker keeps.
func (w *Worker) Backups() []string {
	var out []string
	for _, b := range w.backups {
		out = append(out, b.session.ID)
	}
	return out
}

// BackupKeys is Backups naming each session by its key (SessionKey).
func (w *Worker) BackupKeys() []SessionKey {
	var out []SessionKey
	for _, b := range w.backups {
		out = append(out, b.session)
	}
	return out
}
