// SPDX-License-Identifier: MIT
// The header units have no code to run; linking them together is the test.
int main()
{
    return 0;
}
