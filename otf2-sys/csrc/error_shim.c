/* The C that Rust cannot write: OTF2's error callback receives a va_list, which stable Rust
 * cannot consume. This shim formats the message with vsnprintf and hands plain strings to a
 * Rust function (the "sink"), passed in as a function pointer so that no Rust symbol needs a
 * fixed, exported name.
 *
 * Everything here is linked statically into whatever links otf2-sys, next to the static
 * OTF2 it registers with, so the registration only ever reaches our own copy of OTF2. */
#include <otf2/otf2.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void ( *otf2_sys_error_sink )( const char*    file,
                                       uint64_t       line,
                                       const char*    function,
                                       OTF2_ErrorCode code,
                                       const char*    message );

static otf2_sys_error_sink otf2_sys_sink;

static OTF2_ErrorCode
otf2_sys_error_shim( void*          userData,
                     const char*    file,
                     uint64_t       line,
                     const char*    function,
                     OTF2_ErrorCode errorCode,
                     const char*    msgFormatString,
                     va_list        va )
{
    ( void )userData;
    char  small[ 512 ];
    char* message = small;
    small[ 0 ]    = '\0';
    if ( msgFormatString )
    {
        va_list again;
        va_copy( again, va );
        int needed = vsnprintf( small, sizeof( small ), msgFormatString, va );
        if ( needed >= ( int )sizeof( small ) )
        {
            char* large = malloc( ( size_t )needed + 1 );
            if ( large )
            {
                vsnprintf( large, ( size_t )needed + 1, msgFormatString, again );
                message = large;
            }
        }
        va_end( again );
    }
    otf2_sys_error_sink sink = __atomic_load_n( &otf2_sys_sink, __ATOMIC_ACQUIRE );
    if ( sink )
    {
        sink( file, line, function, errorCode, message );
    }
    if ( message != small )
    {
        free( message );
    }
    /* What OTF2's default handler returns too: the caller sees the original code. */
    return errorCode;
}

/* Installs `sink` as the receiver of every OTF2 error and warning of this copy of OTF2.
 * OTF2 then prints nothing on stderr itself. */
void
otf2_sys_install_error_shim( otf2_sys_error_sink sink )
{
    __atomic_store_n( &otf2_sys_sink, sink, __ATOMIC_RELEASE );
    ( void )OTF2_Error_RegisterCallback( otf2_sys_error_shim, NULL );
}
