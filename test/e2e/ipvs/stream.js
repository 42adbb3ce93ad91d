#!/usr/bin/env node
// Long-lived TCP connections for the IPVS graceful-termination and restart tests.
//   node stream.js server NAME PORT   answers every line with {"name", "peer"} (keeps the connection)
//   node stream.js client HOST PORT   one connection; stdin "ping" sends a line, "reset" aborts with a
//                                     TCP reset, "end" closes; prints one JSON line per event
//   node stream.js udp HOST PORT      one datagram from a CONNECTED UDP socket (which, unlike an unconnected
//                                     one, hears ICMP port unreachable: err ECONNREFUSED); prints one JSON line
'use strict';
const net = require('node:net');
const [role, a, b] = process.argv.slice(2);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
if (role === 'server') {
  const strip = (x) => (x && x.startsWith('::ffff:') ? x.slice(7) : x);
  net.createServer((s) => {
    s.on('error', () => {});
    let buf = '';
    s.on('data', (d) => {
      buf += d;
      for (let i; (i = buf.indexOf('\n')) >= 0; buf = buf.slice(i + 1)) s.write(JSON.stringify({ name: a, peer: strip(s.remoteAddress) }) + '\n');
    });
  }).listen(Number(b), () => out({ ready: true }));
  process.on('SIGTERM', () => process.exit(0));
} else if (role === 'udp') {
  const u = require('node:dgram').createSocket(net.isIPv6(a) ? 'udp6' : 'udp4');
  const done = (o) => { out(o); process.exit(0); };
  setTimeout(() => done({ ok: false, err: 'timeout' }), 2000);
  u.on('message', (m) => done({ ok: true, reply: String(m).trim() }));
  u.on('error', (e) => done({ ok: false, err: e.code || String(e) }));
  u.connect(Number(b), a, () => u.send('ping'));
} else {
  const s = net.connect({ host: a, port: Number(b) });
  let buf = '';
  s.on('connect', () => out({ connected: true }));
  s.on('data', (d) => {
    buf += d;
    for (let i; (i = buf.indexOf('\n')) >= 0; buf = buf.slice(i + 1)) out({ reply: JSON.parse(buf.slice(0, i)) });
  });
  s.on('error', (e) => out({ error: e.code || String(e) }));
  s.on('close', () => { out({ closed: true }); process.exit(0); });
  let inb = '';
  process.stdin.on('data', (d) => {
    inb += d;
    for (let i; (i = inb.indexOf('\n')) >= 0; inb = inb.slice(i + 1)) {
      const cmd = inb.slice(0, i).trim();
      if (cmd === 'ping') s.write('ping\n');
      else if (cmd === 'reset') s.resetAndDestroy();
      else if (cmd === 'end') s.end();
    }
  });
}
