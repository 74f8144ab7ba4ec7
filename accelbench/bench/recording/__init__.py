"""Running and recording: the session that turns outcomes into stored records, resumes
finished sweeps and recovers what a dead launcher left."""
