import type { ModuleDeps } from '../../server/module.ts';
import { type DocumentFiles, documentFiles } from '../interfaces/documentFiles.ts';

/** The documents module's files (originals, archives, download URLs): a service it provides (handlers/interfaces/documentFiles.ts). */
export const filesOf = (deps: Pick<ModuleDeps, 'services'>): DocumentFiles => deps.services.get(documentFiles);

export type { DocumentFiles, StoredFile } from '../interfaces/documentFiles.ts';
