// A client that never pauses, for the migration check (hack/cluster/migration-check.sh): a new TCP
// connection to HOST:PORT (an echo server) every 20 ms, each writing "ping" and waiting for it back,
// and one connection held open, writing a message every 100 ms. Every failure is a line "fail <what>";
// a line "ok <new connections> long <messages echoed>" every second.
//   node tcp-client.js HOST PORT
const net = require('net');
const [host, port] = [process.argv[2], Number(process.argv[3])];
let ok = 0;
const fail = (what) => console.log(`fail ${what}`);
setInterval(() => {
  const s = net.connect({ host, port, timeout: 2000 });
  let got = '';
  s.on('connect', () => s.write('ping'));
  s.on('data', (d) => { got += d; if (got === 'ping') { ok++; s.end(); } });
  s.on('timeout', () => { fail('new timeout'); s.destroy(); });
  s.on('error', (e) => fail(`new ${e.code}`));
}, 20);
const long = net.connect({ host, port });
let n = 0, echoed = '';
long.on('error', (e) => fail(`long ${e.code}`));
long.on('close', () => fail('long closed'));
long.on('data', (d) => { echoed += d; });
setInterval(() => long.write(`m${n++};`), 100);
setInterval(() => console.log(`ok ${ok} long ${echoed.split(';').length - 1}`), 1000);
