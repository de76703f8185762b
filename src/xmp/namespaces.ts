/** Namespace URIs the XMP code works with. Prefixes in files are arbitrary; these URIs are what count. */
export const NS_X = 'adobe:ns:meta/';
export const NS_RDF = 'http://www.w3.org/1999/02/22-rdf-syntax-ns#';
export const NS_XML = 'http://www.w3.org/XML/1998/namespace';
export const NS_XMLNS = 'http://www.w3.org/2000/xmlns/';
/** PLUS (Picture Licensing Universal System) LDF namespace, where DataMining lives. */
export const NS_PLUS = 'http://ns.useplus.org/ldf/xmp/1.0/';
/** Seen in the wild: the same namespace written with https. Read, never written. */
export const NS_PLUS_HTTPS = 'https://ns.useplus.org/ldf/xmp/1.0/';
export const NS_XMP_NOTE = 'http://ns.adobe.com/xmp/note/';
/** W3C TDMRep (Text and Data Mining Reservation Protocol): tdm:reservation, tdm:policy. */
export const NS_TDMREP = 'http://www.w3.org/ns/tdmrep/';
/** RSL (Really Simple Licensing) 1.0: an `rsl` licence in XMP (rslstandard.org/guide/file-embedding). */
export const NS_RSL = 'https://rslstandard.org/rsl';
