// SQLite WAL checkpoints on their own thread (see startCheckpointer in database.ts): a PASSIVE
// checkpoint copies committed pages into the database file without blocking the writers.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

const db = new Database(workerData.filename);
db.pragma('busy_timeout = 1000');
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // busy or closing: the next tick tries again
  }
}, workerData.intervalMs);
parentPort.once('message', () => {
  clearInterval(timer);
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } finally {
    db.close();
    parentPort.close();
  }
});
