// Loaded with `node --import` into each process on a benchmark's path (upstream, relay, polar): the
// wall-clock time of every socket read and write, and of each HTTP request's arrival, body end and
// finish, written as JSON to $SOCKET_TIMES when the process exits. bench/hop-timeline.ts lines these
// up across processes to tell where a call's time goes: delivery between processes, or work inside one.
// Times are performance.timeOrigin + performance.now(): milliseconds since the epoch, comparable
// between processes on one machine.
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';

const file = process.env.SOCKET_TIMES;
const events = [];
const now = () => performance.timeOrigin + performance.now();
let sockets = 0;
// 'S' for a socket a server accepted (the caller's side), 'C' for one this process opened (upstream).
const side = (socket) => (socket.server ? 'S' : 'C');
const id = (socket) => (socket.__socketTimesId ??= ++sockets);

const emit = net.Socket.prototype.emit;
net.Socket.prototype.emit = function (event, chunk) {
  if (event === 'data') events.push([now(), `${side(this)}read`, id(this), chunk.length]);
  return emit.apply(this, arguments);
};
// Every write and writev of a net.Socket goes through _writeGeneric (Node 18–22).
const writeGeneric = net.Socket.prototype._writeGeneric;
net.Socket.prototype._writeGeneric = function (writev, data) {
  const bytes = writev ? data.reduce((n, d) => n + d.chunk.length, 0) : data.length;
  events.push([now(), `${side(this)}write`, id(this), bytes]);
  return writeGeneric.apply(this, arguments);
};
const serverEmit = http.Server.prototype.emit;
http.Server.prototype.emit = function (event, req, res) {
  if (event === 'request') {
    const socket = id(req.socket);
    events.push([now(), 'request', socket, 0]);
    req.once('end', () => events.push([now(), 'bodyEnd', socket, 0]));
    res.once('finish', () => events.push([now(), 'finish', socket, 0]));
  }
  return serverEmit.apply(this, arguments);
};

let written = false;
const write = () => {
  if (written || !file) return;
  written = true;
  fs.writeFileSync(file, JSON.stringify(events));
};
process.on('exit', write);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.prependListener(signal, () => {
    write();
    // Only this listener: keep the signal's default, ending the process.
    if (process.listenerCount(signal) === 1) process.exit(0);
  });
}
