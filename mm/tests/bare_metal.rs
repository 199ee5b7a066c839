//! The steps of the bare-metal example (`examples/bare_metal.rs`) on the host: the boot map, the
//! translation registers and a user address space with its flushes, over a recording TLB and
//! checked with the tables' own walk. (`scripts/test` also boots the example on QEMU, where the
//! CPU's walk checks each step.)

#[path = "../examples/bare_metal.rs"]
mod example;

#[test]
fn the_bare_metal_example_runs_on_the_host() {
    example::main();
}
