// Types of server/start-cache.cjs.
export declare function cacheFolder(name: string): string;
export declare function writeCacheFile(file: string, text: string): void;
