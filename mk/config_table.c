/*
 * config_table.c — prints the table of GMP_* variables that
 * docs/user-guide.md holds, made from the option list of recorder/config.c
 * (gmp_config_doc_table), so the page is never written by hand: `make docs`
 * splices it in (mk/docs.sh), and test_config fails when the page differs.
 */
#include "recorder.h"

#include <stdio.h>
#include <string.h>

int main(void)
{
    static char table[16384];
    size_t n = gmp_config_doc_table(table, sizeof table);
    if (n == 0 || n >= sizeof table) {
        fputs("config-table: the table does not fit its buffer\n", stderr);
        return 1;
    }
    fputs(table, stdout);
    if (table[n - 1] != '\n')
        putchar('\n');
    return 0;
}
