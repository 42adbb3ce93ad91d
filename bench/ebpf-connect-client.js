#!/usr/bin/env node
// Connect-latency client for bench/ebpf-connect.bench.ts: COUNT sequential TCP connects to HOST:PORT,
// prints one JSON line {p50, p99, ok, failed} of the connect() -> established times in ms.
'use strict';
const net = require('node:net');
const [host, portS, countS] = process.argv.slice(2);
const count = Number(countS || 1000);
const once = () => new Promise((resolve) => {
  const t0 = process.hrtime.bigint();
  const s = net.connect({ host, port: Number(portS) });
  s.on('connect', () => { const ms = Number(process.hrtime.bigint() - t0) / 1e6; s.destroy(); resolve(ms); });
  s.on('error', () => { s.destroy(); resolve(-1); });
});
(async () => {
  const times = [];
  let failed = 0;
  for (let i = 0; i < count; i++) { const ms = await once(); if (ms < 0) failed++; else times.push(ms); }
  times.sort((a, b) => a - b);
  const q = (p) => times[Math.min(times.length - 1, Math.floor(times.length * p))];
  process.stdout.write(JSON.stringify({ p50: q(0.5), p99: q(0.99), ok: times.length, failed }) + '\n');
})();
