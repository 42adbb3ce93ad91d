#!/usr/bin/env node
// eBPF e2e client, run inside the test cgroup and a client network namespace with no route to service
// addresses. One JSON line per attempt:
//   {"ok":true,"name":<server>,"from":"<addr>:<port>"}   from: the reply's source as the application sees it
//   {"ok":false,"err":"ECONNREFUSED"|"ENETUNREACH"|"timeout"|...}
// Usage: node client.js tcp|udp|udpc|udphold|tcphold HOST PORT [COUNT=1]
//   tcp: connect, read the line, from = getpeername(); udp: unconnected sendto, from = recvfrom's
//   source; udpc: connected UDP socket, from = getpeername(); udphold: one connected UDP socket that
//   pings every 100 ms and prints every reply, until an error (printed) or 20 s; tcphold: the same over
//   one TCP connection to a server that answers each line (test/e2e/ipvs/stream.js server), from =
//   getpeername(); a close without an error prints err "closed".
'use strict';
const net = require('node:net');
const dgram = require('node:dgram');

const [mode, host, portS, countS] = process.argv.slice(2);
const port = Number(portS);
const count = Number(countS || 1);
const TIMEOUT = 2000;

function tcp() {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    let buf = '', done = false;
    const finish = (r) => { if (!done) { done = true; clearTimeout(t); s.destroy(); resolve(r); } };
    const t = setTimeout(() => finish({ ok: false, err: 'timeout' }), TIMEOUT);
    let from = '';
    s.on('connect', () => { from = `${s.remoteAddress}:${s.remotePort}`; });
    s.on('data', (d) => {
      buf += d;
      const i = buf.indexOf('\n');
      if (i >= 0) finish({ ok: true, name: JSON.parse(buf.slice(0, i)).name, from });
    });
    s.on('error', (e) => finish({ ok: false, err: e.code || String(e) }));
    s.on('end', () => finish({ ok: false, err: 'closed' }));
  });
}

function udp(connected) {
  return new Promise((resolve) => {
    const s = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
    let done = false;
    const finish = (r) => { if (!done) { done = true; clearTimeout(t); try { s.close(); } catch { /* closed */ } resolve(r); } };
    const t = setTimeout(() => finish({ ok: false, err: 'timeout' }), TIMEOUT);
    s.on('error', (e) => finish({ ok: false, err: e.code || String(e) }));
    s.on('message', (m, rinfo) => {
      let from = `${rinfo.address}:${rinfo.port}`;
      if (connected) { const r = s.remoteAddress(); from = `${r.address}:${r.port}`; }
      finish({ ok: true, name: JSON.parse(String(m)).name, from });
    });
    const cb = (e) => { if (e) finish({ ok: false, err: e.code || String(e) }); };
    if (connected) {
      s.connect(port, host, (e) => { if (e) return cb(e); s.send('ping', cb); });
    } else {
      s.send('ping', port, host, cb);
    }
  });
}

function hold() {
  const s = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
  const out = (r) => process.stdout.write(JSON.stringify(r) + '\n');
  const stop = () => { clearInterval(t); clearTimeout(limit); try { s.close(); } catch { /* closed */ } };
  const t = setInterval(() => s.send('ping', (e) => { if (e) { out({ ok: false, err: e.code || String(e) }); stop(); } }), 100);
  const limit = setTimeout(stop, 20000);
  s.on('error', (e) => { out({ ok: false, err: e.code || String(e) }); stop(); });
  s.on('message', (m, rinfo) => out({ ok: true, name: JSON.parse(String(m)).name, from: `${rinfo.address}:${rinfo.port}` }));
  s.connect(port, host);
}

function tcpHold() {
  const out = (r) => process.stdout.write(JSON.stringify(r) + '\n');
  const s = net.connect({ host, port });
  let buf = '', from = '', failed = false;
  const t = setInterval(() => { if (from) s.write('ping\n'); }, 100);
  const limit = setTimeout(() => s.destroy(), 20000);
  s.on('connect', () => { from = `${s.remoteAddress}:${s.remotePort}`; });
  s.on('data', (d) => {
    buf += d;
    for (let i; (i = buf.indexOf('\n')) >= 0; buf = buf.slice(i + 1)) out({ ok: true, name: JSON.parse(buf.slice(0, i)).name, from });
  });
  s.on('error', (e) => { failed = true; out({ ok: false, err: e.code || String(e) }); });
  s.on('close', () => { clearInterval(t); clearTimeout(limit); if (!failed) out({ ok: false, err: 'closed' }); });
}

if (mode === 'udphold') hold();
else if (mode === 'tcphold') tcpHold();
else (async () => {
  for (let i = 0; i < count; i++) {
    const r = mode === 'tcp' ? await tcp() : await udp(mode === 'udpc');
    process.stdout.write(JSON.stringify(r) + '\n');
  }
})();
