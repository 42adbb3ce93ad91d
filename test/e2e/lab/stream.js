#!/usr/bin/env node
// A long-lived connection for lab tests, run inside network namespaces.
//   node stream.js serve NAME PORT              TCP: answers every line with {"name":NAME,"n":<line>}
//   node stream.js tcp HOST PORT INTERVAL_MS    sends a numbered line every interval on ONE connection
//   node stream.js udp HOST PORT INTERVAL_MS    the same as datagrams from one source port
// Clients print one JSON line per reply ({"t": ms since start, "name": ...}) and {"event": "closed" |
// "error", ...} when the connection ends; they run until killed.
'use strict';
const net = require('node:net');
const dgram = require('node:dgram');

const [mode, a, b, c] = process.argv.slice(2);
const t0 = Date.now();
const out = (o) => process.stdout.write(JSON.stringify({ t: Date.now() - t0, ...o }) + '\n');

if (mode === 'serve') {
  const srv = net.createServer((s) => {
    s.on('error', () => {});
    let buf = '';
    s.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        s.write(JSON.stringify({ name: a, n: Number(line) }) + '\n');
      }
    });
  });
  srv.listen({ port: Number(b) }, () => process.stdout.write('ready\n'));
} else if (mode === 'tcp') {
  const s = net.connect({ host: a, port: Number(b) });
  let n = 0, buf = '';
  s.on('connect', () => { out({ event: 'connected', local: s.localPort }); setInterval(() => s.write(`${n++}\n`), Number(c)); });
  s.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      try { out({ name: JSON.parse(buf.slice(0, i)).name }); } catch { out({ event: 'garbage' }); }
      buf = buf.slice(i + 1);
    }
  });
  s.on('error', (e) => { out({ event: 'error', code: e.code }); process.exit(0); });
  s.on('close', () => { out({ event: 'closed' }); process.exit(0); });
} else if (mode === 'udp') {
  const u = dgram.createSocket(a.includes(':') ? 'udp6' : 'udp4');
  let n = 0;
  u.on('message', (m) => { try { out({ name: JSON.parse(String(m)).name }); } catch { out({ event: 'garbage' }); } });
  u.on('error', (e) => out({ event: 'error', code: e.code }));
  u.bind(0, () => { out({ event: 'connected', local: u.address().port }); setInterval(() => u.send(`${n++}\n`, Number(b), a), Number(c)); });
} else {
  process.stderr.write('usage: stream.js serve NAME PORT | tcp HOST PORT MS | udp HOST PORT MS\n');
  process.exit(2);
}
process.on('SIGTERM', () => process.exit(0));
