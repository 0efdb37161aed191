// A hot function V8 compiles, timed by the thread that runs it.
// node hot.js SECONDS: spins in spinHot for SECONDS, then prints
// "hot_cpu_s X", the CPU time of this (the main) thread in the loop, and
// its pid ("pid N").
'use strict';
const fs = require('fs');

// The whole timed loop is the function: called once, it is compiled on
// the stack (OSR) as itself, not inlined into a caller.
function spinHot(seconds) {
  const end = Date.now() + seconds * 1000;
  let x = 0;
  while (Date.now() < end) {
    for (let i = 0; i < 100000; i++) {
      x = (x * 31 + (i ^ (x >>> 7))) | 0;
    }
  }
  return x;
}

// utime + stime of this thread, in seconds (fields 14 and 15 of its stat,
// counted after the command name, in the kernel's USER_HZ: 100 a second).
function threadCpu() {
  const stat = fs.readFileSync('/proc/thread-self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

const seconds = parseFloat(process.argv[2]);
const cpu0 = threadCpu();
const sink = spinHot(seconds);
console.log('hot_cpu_s ' + (threadCpu() - cpu0));
console.log('pid ' + process.pid);
if (sink === 42) console.log('');
