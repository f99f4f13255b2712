// The floor of fuse-native on this machine: a filesystem that answers getattr from memory and does nothing
// else. Cold-stat time on it is the least any fuse-native daemon (nasd included) can take per lookup.
// usage: node bench/floor.cjs <mountpoint>   (SIGTERM unmounts)
const Fuse = require('fuse-native');
const now = new Date();
const dir = { mode: 0o40755, size: 4096, mtime: now, atime: now, ctime: now, nlink: 1 };
const file = { mode: 0o100644, size: 4096, mtime: now, atime: now, ctime: now, nlink: 1 };
const ops = {
  getattr: (p, cb) => (p === '/' || p === '/small' ? cb(0, dir) : /^\/small\/f\d+$/.test(p) ? cb(0, file) : cb(Fuse.ENOENT)),
  readdir: (p, cb) => cb(0, []),
};
const fuse = new Fuse(process.argv[2], ops, { entryTimeout: 1, attrTimeout: 1, fsname: 'floor' });
fuse.mount((err) => {
  if (err) throw err;
  console.log('mounted');
});
process.on('SIGTERM', () => fuse.unmount(() => process.exit(0)));
