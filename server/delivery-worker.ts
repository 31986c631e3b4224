// Delivers queued messages inside the service. "Delivery" is recording it: there is no
// external transport. The queue is the messages table, so what is still queued when
// the process stops is picked up by the next start.
import type { Db } from '../db/client';
import { createMessagesRepository } from '../db/messages';
import type { Config } from './config';
import type { Logger } from './log';

export interface DeliveryWorker {
  /** Stops the loop; resolves once no delivery is running. */
  stop(): Promise<void>;
}

const batchSize = 100;

export function startDeliveryWorker({
  db,
  config,
  log,
  intervalMs = 100,
}: {
  db: Db;
  config: Pick<Config, 'messageDeliveryDelayMs'>;
  log: Logger;
  intervalMs?: number;
}): DeliveryWorker {
  const messages = createMessagesRepository(db);
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const tick = () => {
    timer = undefined;
    if (stopped) return;
    try {
      const now = Date.now();
      const due = new Date(now - config.messageDeliveryDelayMs).toISOString();
      let delivered: string[];
      // Drains a backlog in batches without holding the write lock for all of it at once.
      do {
        delivered = messages.deliverDue(due, new Date(now).toISOString(), batchSize);
        if (delivered.length > 0) log.debug({ ids: delivered }, 'messages delivered');
      } while (delivered.length === batchSize && !stopped);
    } catch (error) {
      // A busy or failing database must not kill the loop; the next tick retries.
      log.error({ err: error }, 'message delivery failed');
    }
    if (!stopped) schedule();
  };

  const schedule = () => {
    timer = setTimeout(tick, intervalMs);
    // The worker alone must never keep the process alive.
    timer.unref();
  };

  schedule();
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}
