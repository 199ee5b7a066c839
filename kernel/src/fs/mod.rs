//! Files: descriptors' objects (the console terminal, pipes, memfds) and readiness (`poll`).
pub mod memfd;
pub mod pipe;
pub mod poll;
pub mod tty;
