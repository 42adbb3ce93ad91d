#!/usr/bin/env node
// Lab client, run inside a namespace: makes COUNT sequential attempts and prints one JSON line each:
//   {"ok":true,"name":...,"me":...,"peer":...,"ms":...}  or  {"ok":false,"err":"ECONNREFUSED"|"timeout"|...,"ms":...}
// Usage: node probe.js tcp|udp HOST PORT [COUNT=1] [TIMEOUT_MS=1500] [SRC_PORT=0]
'use strict';
const net = require('node:net');
const dgram = require('node:dgram');

const [proto, host, portS, countS, timeoutS, srcPortS] = process.argv.slice(2);
const port = Number(portS);
const count = Number(countS || 1);
const timeout = Number(timeoutS || 1500);
const srcPort = Number(srcPortS || 0);

function tcpOnce() {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const ms = () => Number(process.hrtime.bigint() - t0) / 1e6;
    let buf = '';
    let done = false;
    const finish = (r) => { if (!done) { done = true; clearTimeout(timer); sock.destroy(); resolve({ ...r, ms: ms() }); } };
    const opts = { host, port };
    if (srcPort) opts.localPort = srcPort;
    const sock = net.connect(opts);
    const timer = setTimeout(() => finish({ ok: false, err: 'timeout' }), timeout);
    sock.on('connect', () => { connectMs = ms(); });
    let connectMs = 0;
    sock.on('data', (d) => {
      buf += d;
      const i = buf.indexOf('\n');
      if (i >= 0) {
        try { finish({ ok: true, connectMs, ...JSON.parse(buf.slice(0, i)) }); } catch (e) { finish({ ok: false, err: 'bad reply' }); }
      }
    });
    sock.on('error', (e) => finish({ ok: false, err: e.code || String(e) }));
    sock.on('end', () => finish({ ok: false, err: 'closed' }));
  });
}

function udpOnce() {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const ms = () => Number(process.hrtime.bigint() - t0) / 1e6;
    const sock = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
    let done = false;
    const finish = (r) => { if (!done) { done = true; clearTimeout(timer); try { sock.close(); } catch {} resolve({ ...r, ms: ms() }); } };
    const timer = setTimeout(() => finish({ ok: false, err: 'timeout' }), timeout);
    sock.on('message', (m) => { try { finish({ ok: true, ...JSON.parse(String(m)) }); } catch { finish({ ok: false, err: 'bad reply' }); } });
    sock.on('error', (e) => finish({ ok: false, err: e.code || String(e) }));
    const send = () => sock.send('ping', port, host, (e) => { if (e) finish({ ok: false, err: e.code || String(e) }); });
    if (srcPort) sock.bind(srcPort, send); else send();
  });
}

(async () => {
  for (let i = 0; i < count; i++) {
    const r = proto === 'udp' ? await udpOnce() : await tcpOnce();
    process.stdout.write(JSON.stringify(r) + '\n');
  }
})();
