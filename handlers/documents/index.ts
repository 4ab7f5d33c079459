import type { ServiceModule } from '../../server/module.ts';

/** Documents: uploads in parts, the scan, files and their download links (work in progress). */
export const documents: ServiceModule<'documents'> = {
  namespace: 'documents',
  handlers: {},
  migrations: new URL('./migrations/', import.meta.url),
};
