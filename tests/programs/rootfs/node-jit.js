// Node.js (V8), run as `setarch -X node --allow-natives-syntax --no-concurrent-recompilation
// /parity/node-jit.js` from a root image of scripts/rootfs node (tests/linux-parity/cases): a
// hot function compiled by TurboFan, promises and timers, fs, a worker thread and a child
// process, each printed on a line starting "node:" (what the parity check compares); then every
// executable mapping of /proc/self/maps (which scripts/test checks lie in one code window with
// node's text; Linux's do not). Nothing printed on the "node:" lines depends on addresses, times
// or the CPU count.
'use strict';
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
if (!isMainThread) {
    let s = 0;
    for (let i = 1; i <= workerData; i++) s += i;
    parentPort.postMessage(s);
    return;
}
const fs = require('fs');
const { execFileSync } = require('child_process');

function hot(n) {
    let s = 0;
    for (let i = 0; i < n; i++) s = (s + i * i) % 1000003;
    return s;
}
// Warmed up until V8's tiering sends it to TurboFan (synchronously: the case runs node with
// --no-concurrent-recompilation, so the point where it is optimised depends on counts, not time).
let r = 0;
for (let k = 0; k < 100; k++) r = hot(10000 + k);
// (Template strings throughout: console.log colours a number it is given on a terminal.)
// V8 10.2's status bits (runtime-test.cc): 1 a function, 16 optimised, 64 TurboFan's code.
const status = %GetOptimizationStatus(hot);
console.log(`node: hot loop ${r}, optimised by TurboFan: ${(status & 16) !== 0 && (status & 64) !== 0}`);

const order = [];
const sleep = (ms, v) => new Promise(res => setTimeout(() => { order.push(v); res(v); }, ms));
// The timers start in the order of their delays, so they fire in that order however long the
// thread waits between starting two of them (node reads the clock at each start: started c
// first, a 10 ms pause before b on a loaded machine let c fire before b); the promises are
// awaited in another order, which Promise.all keeps.
const pa = sleep(10, 'a'), pb = sleep(20, 'b'), pc = sleep(30, 'c');
(async () => {
    const all = await Promise.all([pc, pa, pb]);
    console.log('node: timers fired in order', order.join(''), 'promises resolved', all.join(''));
    const passwd = await fs.promises.readFile('/etc/passwd', 'utf8');
    console.log('node: fs read /etc/passwd, first user', passwd.split(':')[0]);
    fs.writeFileSync('/tmp/node-jit.txt', 'written by node\n');
    console.log('node: fs wrote and read back', JSON.stringify(fs.readFileSync('/tmp/node-jit.txt', 'utf8')));
    const sum = await new Promise((res, rej) => {
        const w = new Worker(__filename, { workerData: 1000 });
        w.on('message', res);
        w.on('error', rej);
    });
    console.log(`node: worker thread summed 1..1000 = ${sum}`);
    console.log('node: child process said', JSON.stringify(execFileSync('/bin/echo', ['hi']).toString()));
    const maps = fs.readFileSync('/proc/self/maps', 'utf8').split('\n');
    for (const l of maps) if (l && l.split(' ')[1].includes('x')) console.log(l);
    // The process's CPU time, every thread's, user and system (not compared: a figure for the
    // benchmark page).
    const cpu = process.cpuUsage();
    console.log(`time: ${Math.round((cpu.user + cpu.system) / 1000)} ms of CPU`);
    console.log('node: done');
})();
