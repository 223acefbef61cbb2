import {
  isValidCnpj,
  isValidCpf,
  isValidCuit,
  isValidNit,
  isValidRut,
  normaliseDocumentId,
  validateDocument,
} from '../../../src/simulator/document-rules';

describe('ARG CUIT/CUIL/CDI: 11 digits with the modulo-11 check digit', () => {
  it.each([
    ['20172543597'], // public example 20-17254359-7
    ['30500010912'], // public example 30-50001091-2
    ['20123456786'], // 20-12345678-6: sum 148, 148 % 11 = 5, 11 - 5 = 6
    ['23000000000'], // check 11 becomes 0
  ])('accepts %s', (id) => {
    expect(isValidCuit(id)).toBe(true);
  });

  it.each([
    ['20172543598', 'wrong check digit'],
    ['20123456780', 'wrong check digit'],
    ['20123450010', 'a body whose check would be 10 is never valid'],
    ['20123450019', 'a body whose check would be 10 is never valid'],
    ['2017254359', 'ten digits'],
    ['201725435977', 'twelve digits'],
    ['2017254359A', 'a letter'],
  ])('refuses %s (%s)', (id) => {
    expect(isValidCuit(id)).toBe(false);
  });

  it('applies to CUIT, CUIL and CDI alike, with dots and dashes', () => {
    for (const type of ['CUIT', 'CUIL', 'CDI']) {
      expect(validateDocument('ARG', type, '20-17254359-7')).toEqual({ valid: true });
      expect(validateDocument('ARG', type, '20-17254359-8')).toEqual({ valid: false, param: 'document.id' });
    }
  });
});

describe('ARG DNI: 7 or 8 digits', () => {
  it.each([['1234567'], ['12345678'], ['12.345.678']])('accepts %s', (id) => {
    expect(validateDocument('ARG', 'DNI', id)).toEqual({ valid: true });
  });
  it.each([['123456'], ['123456789'], ['1234567a']])('refuses %s', (id) => {
    expect(validateDocument('ARG', 'DNI', id)).toEqual({ valid: false, param: 'document.id' });
  });
});

describe('BRA CPF: 11 digits with two check digits', () => {
  it('accepts 529.982.247-25', () => {
    expect(isValidCpf('52998224725')).toBe(true);
    expect(validateDocument('BRA', 'CPF', '529.982.247-25')).toEqual({ valid: true });
  });
  it('refuses a wrong second check digit (529.982.247-24)', () => {
    expect(validateDocument('BRA', 'CPF', '529.982.247-24')).toEqual({ valid: false, param: 'document.id' });
  });
  it('refuses a wrong first check digit (529.982.247-35)', () => {
    expect(isValidCpf('52998224735')).toBe(false);
  });
  it('refuses all-equal digits even though their check digits add up (111.111.111-11)', () => {
    expect(isValidCpf('11111111111')).toBe(false);
    expect(isValidCpf('00000000000')).toBe(false);
  });
  it('refuses other lengths', () => {
    expect(isValidCpf('5299822472')).toBe(false);
    expect(isValidCpf('529982247250')).toBe(false);
  });
});

describe('BRA CNPJ: 14 digits with two check digits', () => {
  it('accepts 11.222.333/0001-81', () => {
    expect(isValidCnpj('11222333000181')).toBe(true);
    expect(validateDocument('BRA', 'CNPJ', '11.222.333/0001-81')).toEqual({ valid: true });
  });
  it('refuses 11.222.333/0001-80 and 11.222.333/0001-91', () => {
    expect(validateDocument('BRA', 'CNPJ', '11.222.333/0001-80')).toEqual({
      valid: false,
      param: 'document.id',
    });
    expect(isValidCnpj('11222333000191')).toBe(false);
  });
  it('refuses all-equal digits and other lengths', () => {
    expect(isValidCnpj('00000000000000')).toBe(false);
    expect(isValidCnpj('1122233300018')).toBe(false);
  });
});

describe('CHL RUT: 7-8 digits and a modulo-11 check digit (0-9 or K)', () => {
  it.each([['12.345.678-5'], ['76.086.428-5'], ['10.000.013-K'], ['10.000.013-k'], ['1.000.005-K']])(
    'accepts %s',
    (id) => {
      expect(validateDocument('CHL', 'RUT', id)).toEqual({ valid: true });
    },
  );
  it.each([['12.345.678-6'], ['12.345.678-K'], ['10.000.013-0'], ['123456-0']])('refuses %s', (id) => {
    expect(isValidRut(normaliseDocumentId(id))).toBe(false);
  });
});

describe('other countries: length rules', () => {
  it.each([
    ['URY', 'CI', '1.234.567-8', true],
    ['URY', 'CI', '1234567', false],
    ['MEX', 'RFC', 'XAXX010101000', true],
    ['MEX', 'RFC', 'ABC680524P76', true],
    ['MEX', 'RFC', 'ABC68052', false],
    ['MEX', 'CURP', 'GODE561231HDFRRN09', true],
    ['MEX', 'CURP', 'GODE561231HDFRRN0', false],
    ['COL', 'CC', '123456', true],
    ['COL', 'CC', '1234567890', true],
    ['COL', 'CC', '12345', false],
    ['COL', 'CC', '12345678901', false],
    ['COL', 'NIT', '800.197.268-4', true],
    ['COL', 'NIT', '800.197.268-5', false],
    ['PER', 'DNI', '12345678', true],
    ['PER', 'DNI', '1234567', false],
  ])('%s %s %s -> valid %s', (country, type, id, valid) => {
    expect(validateDocument(country, type, id).valid).toBe(valid);
  });

  it('checks the DIAN check digit of a NIT', () => {
    expect(isValidNit('8001972684')).toBe(true);
    expect(isValidNit('8001972680')).toBe(false);
  });
});

describe('unknown parameters', () => {
  it('names the country when the country is unknown', () => {
    expect(validateDocument('XYZ', 'CUIT', '20172543597')).toEqual({ valid: false, param: 'country' });
    expect(validateDocument('toString', 'CUIT', '20172543597')).toEqual({ valid: false, param: 'country' });
  });
  it('names the type when the country does not know it', () => {
    expect(validateDocument('ARG', 'CPF', '52998224725')).toEqual({ valid: false, param: 'document.type' });
    expect(validateDocument('BRA', 'constructor', '52998224725')).toEqual({
      valid: false,
      param: 'document.type',
    });
  });
  it('matches the type case-insensitively', () => {
    expect(validateDocument('ARG', 'cuit', '20172543597')).toEqual({ valid: true });
  });
});

describe('id formatting', () => {
  it('ignores dots, dashes, slashes and spaces', () => {
    expect(normaliseDocumentId(' 11.222.333/0001-81 ')).toBe('11222333000181');
    expect(validateDocument('ARG', 'CUIT', '20 17254359 7')).toEqual({ valid: true });
  });
  it('does not ignore other characters', () => {
    expect(validateDocument('ARG', 'CUIT', '20_17254359_7')).toEqual({ valid: false, param: 'document.id' });
  });
});
