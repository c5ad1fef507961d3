/* The one header bindgen reads: the whole public OTF2 API (archive, readers, writers,
 * definitions, events, callbacks). Not the header-only helpers OTF2_Pthread_Locks.h,
 * OTF2_OpenMP_Locks.h or OTF2_MPI_Collectives.h: they are static functions. */
#include <otf2/otf2.h>
