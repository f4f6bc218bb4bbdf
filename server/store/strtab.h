/* strtab.h: an upload's string table (lib/intern.h) read as an SQL table.
 *
 * Owns the table-valued function fp_strings(P) of a connection: one row (id, s) per
 * string of the intern table P, in id order, P bound with sqlite3_bind_pointer and type
 * STRTAB_POINTER (a value of any other type or kind is no table: no rows). Must not write
 * the table nor keep P past the statement.
 *
 * Why: the commit inserted 100,000 strings one INSERT each (92 ms at 100,000 kernel names,
 * issue 24); INSERT ... SELECT FROM fp_strings(?) steps one statement. */
#ifndef FP_STRTAB_H
#define FP_STRTAB_H

#include <sqlite3.h>

#define STRTAB_POINTER "firstpass-intern"

/* Registers fp_strings on db (again: a no-op that replaces it): SQLITE_OK or an error code. */
int strtab_register(sqlite3 *db);

#endif
