//! Resource exhaustion: no program can panic the kernel by asking for too much (threads,
//! mappings, memory), and the kernel heap grows from frames up to its ceiling and no further.
