// The benchmark's floor: a pass-through proxy that moves bytes and nothing else (no parsing, no
// recording), built from the same parts as polar's proxy (node:http in, a keep-alive node:http
// client out). Its added latency is what any extra hop costs on the machine; polar's minus it is
// polar's work.
import http from 'node:http';

const upstream = new URL(process.argv[2]);
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = Buffer.concat(chunks);
  const up = http.request({ agent, host: upstream.hostname, port: upstream.port, method: 'POST', path: req.url, headers: { 'content-type': 'application/json', 'content-length': body.length } }, (reply) => {
    res.writeHead(reply.statusCode, { 'content-type': reply.headers['content-type'] });
    reply.on('data', (c) => res.write(c));
    reply.on('end', () => res.end());
  });
  up.on('error', () => res.destroy());
  up.end(body);
});
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` })));
process.on('SIGTERM', () => process.exit(0));
