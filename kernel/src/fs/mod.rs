//! Files: what a descriptor refers to, and the objects behind it.
//! - [`file`](mod@file): open file descriptions, descriptors and a process's descriptor table;
//! - [`tty`]: the console as the programs' terminal (the line discipline between the UART and
//!   `read`);
//! - [`pipe`](mod@pipe): pipes;
//! - [`memfd`]: memfds, shared memory objects with a descriptor;
//! - [`text`]: files whose text is generated when first read (`/proc/self/maps`);
//! - [`poll`]: what each kind of file is ready for.
//!
//! Below `process`: nothing here knows a process. A call that needs one (to install a
//! descriptor, to send `SIGPIPE`) is given what it needs by the system-call layer.
pub mod file;
pub mod memfd;
pub mod pipe;
pub mod poll;
pub mod text;
pub mod tty;
